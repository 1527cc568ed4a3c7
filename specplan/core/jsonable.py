"""Plain JSON values from numpy scalars and arrays (used by the CLI and by every report writer)."""

from __future__ import annotations

import math

import numpy as np


def to_jsonable(obj, path: str = ""):
    """Numpy scalars/arrays and floats -> plain JSON types. NaN means "no value" (e.g. a time window without a
    decode step) and becomes null; an infinity is never a result and is an error naming its key."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist() if obj.ndim else obj.item(), path)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item(), path)
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            from specplan.core.errors import SpecplanError

            raise SpecplanError(f"output {path or 'value'} is {obj}, not a finite number: the inputs are outside "
                                f"what the model can price (please report the command)")
        return round(obj, 6) if abs(obj) < 1e15 else obj
    return obj
