import logging


def pytest_unconfigure(config):
    # Salt flushes its log handlers at exit, after pytest closed the captured
    # streams they point at; the resulting "--- Logging error ---" dumps are noise.
    logging.raiseExceptions = False
