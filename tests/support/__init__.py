"""The tests' shared helpers, imported as ``tests.support.<module>``: the mocks harness and config
builders, the fakes and mirrors the unit tier serves on loopback, and the cluster tier's clusters,
environment and probes. A test module imports helpers from here, never from another test module."""
