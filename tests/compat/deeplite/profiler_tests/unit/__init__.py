# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/profiler_tests/unit/__init__.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.

class BaseUnitTest:

	def setup_method(self, method):
		""" setup any state tied to the execution of the given method in a
		class.  setup_method is invoked for every test method of a class.
		"""
		print("setup ", method.__name__)
		pass


	def teardown_method(self, method):
		""" teardown any state that was previously setup with a setup_method
		call.
		"""
		print("teardown ", method.__name__)
		pass