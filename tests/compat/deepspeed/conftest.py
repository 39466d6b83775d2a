def pytest_configure(config):
    # DeepSpeed's own marker, used by its ported tests (they run in this one process either way)
    config.addinivalue_line("markers", "sequential: DeepSpeed's marker for tests that must not run in parallel")
