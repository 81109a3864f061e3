"""``python -m healthgate`` (in the image) or ``python -m eks_gpu_training.healthgate``: run the gate."""

from .app import main

raise SystemExit(main())
