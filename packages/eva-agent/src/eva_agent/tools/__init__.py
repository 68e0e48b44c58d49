"""Real offline tools: OCR (rapidocr, Tesseract), detection, crop-and-zoom, calculator."""

from eva_agent.tools.base import Tool
from eva_agent.tools.cache import CachedTool, ToolCache, image_hash
from eva_agent.tools.calc import Calculator, evaluate
from eva_agent.tools.detect import HFZeroShotDetector, ShapeColorDetector
from eva_agent.tools.image_ops import CropZoom, crop_zoom, to_original
from eva_agent.tools.ocr import RapidOCRTool, TesseractTool

__all__ = [
    "CachedTool",
    "Calculator",
    "CropZoom",
    "HFZeroShotDetector",
    "RapidOCRTool",
    "ShapeColorDetector",
    "TesseractTool",
    "Tool",
    "ToolCache",
    "crop_zoom",
    "evaluate",
    "image_hash",
    "to_original",
]
