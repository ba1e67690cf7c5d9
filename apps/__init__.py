"""apps: the sample apps, each an AndroidManifest.xml and a main.py."""
