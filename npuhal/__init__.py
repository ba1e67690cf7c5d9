"""npuhal: the vendor HAL process and the Python face of the C driver."""
