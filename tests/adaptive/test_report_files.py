"""Files `adaptive -o` writes: no 'nan' text (a window without a finished request has an empty latency cell)."""

import numpy as np

from specplan.adaptive.records import RequestsRun, WindowSeries
from specplan.adaptive.report import write_report


def test_series_csv_writes_empty_cells_not_nan(tmp_path):
    series = WindowSeries(t_s=[0.5, 1.0], draft_len=[3.0, 3.0], batch=[1.0, 2.0], al=[2.5, 2.5],
                          tpot_ms=[6.0, 6.5], request_tpot_p50_ms=[np.nan, 7.25])
    res = RequestsRun(mode="requests", policies=[], series={"fixed:3": series}, model="m", hardware="h", engine="e",
                      requests=2, source="test", costs=None)
    paths = write_report(res, tmp_path, plot_stem=None)
    text = (tmp_path / "series_fixed_3.csv").read_text()
    assert "nan" not in text.lower()
    assert text.splitlines()[1:] == ["0.5,3.0,1.0,2.5,6.0,", "1.0,3.0,2.0,2.5,6.5,7.25"]
    assert tmp_path / "series_fixed_3.csv" in paths
