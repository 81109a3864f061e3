"""Scheduling policy and training workloads: priority classes, training namespaces with fleet-derived
quotas, PodDisruptionBudgets, the training pod template and Indexed Job, and the GPU smoke test.
Plain templates on ``config`` and ``facts``; no AWS resources."""
