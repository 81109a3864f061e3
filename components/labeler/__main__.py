"""``python -m labeler`` (in the image) or ``python -m eks_gpu_training.labeler``: run the labeler."""

from .app import main

raise SystemExit(main())
