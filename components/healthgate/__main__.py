"""``python -m healthgate`` (in the image) or ``python -m eks_gpu_training.healthgate``: run the gate."""

from .gate_loop import main

raise SystemExit(main())
