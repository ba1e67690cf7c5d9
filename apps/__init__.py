"""apps: the sample apps, each an AndroidManifest.xml and a main.py.

``_kit`` is what they share (a report, small models with numpy references, the
load slot, device choice by NNAPI discovery); a sample imports it as ``apps._kit``,
anything outside the apps (``bench/load_app.py``) from here.
"""

from ._kit import LoadOutcome as LoadOutcome
from ._kit import LoadSlot as LoadSlot
from ._kit import Report as Report
from ._kit import SlotEvent as SlotEvent
from ._kit import choose_device as choose_device
from ._kit import close_enough as close_enough
from ._kit import convnet as convnet
from ._kit import cpu_device as cpu_device
from ._kit import device_for as device_for
from ._kit import load_model as load_model
from ._kit import mlp as mlp
from ._kit import percentile as percentile
