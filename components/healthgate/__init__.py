"""The health gate: GPU nodes join tainted and get work only once their checks pass; a node whose
GPUs fail later is taken out of its jobs. Its own program, built into its own image from this
folder alone, so it imports nothing of the library (the library imports its settings)."""
