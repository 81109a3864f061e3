"""``python -m labeler`` (in the image) or ``python -m components.labeler``: run the labeler."""

from .app import main

raise SystemExit(main())
