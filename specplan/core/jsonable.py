"""Plain JSON values from numpy scalars and arrays (used by the CLI and by every report writer)."""

from __future__ import annotations

import math

import numpy as np

from specplan.core.records import FieldMapping

SIGNIFICANT = 9  # significant digits of a float in JSON output, not decimals (2.5e-9 requests/s stays 2.5e-9);
# 9 keeps ratios of printed values within 1e-8 of the ratios computed


def to_jsonable(obj, path: str = ""):
    """Numpy scalars/arrays and floats -> plain JSON types. NaN means "no value" (e.g. a time window without a
    decode step) and becomes null; an infinity is never a result and is an error naming its key. Floats keep
    SIGNIFICANT significant digits (whole numbers below 2**53 exactly)."""
    if isinstance(obj, (dict, FieldMapping)):  # a Record writes as the dict answer it replaced
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
        return obj if obj.is_integer() and abs(obj) < 2**53 else float(f"{obj:.{SIGNIFICANT}g}")
    return obj
