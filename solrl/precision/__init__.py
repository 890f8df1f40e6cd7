"""Low-precision numerics (formats), quantized linear layers and the explore engine."""
from .formats import FORMATS, pack_nvfp4, packed_bits_per_element, quantize_dequantize, unpack_nvfp4

__all__ = ["FORMATS", "pack_nvfp4", "packed_bits_per_element", "quantize_dequantize", "unpack_nvfp4"]
