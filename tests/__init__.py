"""The project's tests: the unit tier (``unit/``), the cluster tier (``cluster/``), the benchmarks
(``benchmarks/``) and the helpers they share (``support/``), imported by package name."""
