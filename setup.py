import re
from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="deeplite-like",
    version=re.search(r'__version__ = "([^"]+)"', (Path(__file__).parent / "deeplite_like" / "_version.py")
                      .read_text(encoding="utf-8")).group(1),
    description="Exact MACs, FLOPs, parameters, memory and latency of PyTorch and Keras models, "
                "per model, module and operator; compare a student with its teacher.",
    long_description=Path(__file__).with_name("README.rst").read_text(encoding="utf-8"),
    long_description_content_type="text/x-rst",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=find_packages(include=["deeplite_like", "deeplite_like.*"]),
    package_data={"deeplite_like": ["py.typed"]},  # (PEP 561: the package ships its type hints)
    install_requires=["prettytable>=3.0", "tqdm>=4.60"],
    extras_require={
        "torch": ["torch>=2.1", "numpy"],
        "keras": ["keras>=3.0", "tensorflow-cpu>=2.16", "numpy"],
        # ONNX files: onnx reads and infers them, onnxruntime times them, onnxscript is torch.onnx.export's
        "onnx": ["onnx>=1.16", "onnxruntime>=1.18", "onnxscript>=0.3", "numpy"],
        # transformers: the hf: models, meta counting of transformers decoders and the HF example run in the tests
        "test": ["pytest>=7", "hypothesis>=6", "numpy", "transformers>=5"],
    },
    entry_points={"console_scripts": ["deeplite-like=deeplite_like.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
