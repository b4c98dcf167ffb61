"""Files under ``serve --data-dir``: logs, checkpoints, the cluster's metadata, and their recovery."""
