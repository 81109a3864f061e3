"""Facts the rest of the library reads: AWS enumerations from botocore, the GPU instance catalog,
Kubernetes quantities, node operating systems, and what GPU nodes and pods agree on (taint, labels,
extended resources), published NCCL all-reduce baselines. Plain data and pure functions; imports nothing of the library."""
