"""Scheduling policy and training workloads: priority classes, training namespaces with fleet-derived
quotas, PodDisruptionBudgets, the training pod template and Indexed Job, the GPU smoke test, and the
pre-flight checks (DCGM diagnostics, the NCCL all-reduce test and its judge).
Plain templates on ``config`` and ``facts``; no AWS resources."""
