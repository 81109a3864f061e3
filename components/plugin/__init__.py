"""The components as a Pulumi plugin package for every Pulumi language: ``PulumiPlugin.yaml`` and
``__main__`` here, the schema from ``package_analyzer``, the offered components in ``package_provider``."""
