import os
import sys

# Make the checkout importable when the tests run without installing the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
