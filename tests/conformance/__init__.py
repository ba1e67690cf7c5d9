"""npuemu's own NNAPI conformance material: cases harvested from nnref's checked examples,
built into NNAPI models as an app builds them, and the table of what each device passes."""
