"""The chaos matrix runs its jobs with the harnesses of tests/kvstore (clusterkit) and
tests/tools (launchkit); they import as siblings, as in those folders."""
import os
import sys

for _folder in ("kvstore", "tools"):
    sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..", _folder)))
