# SPDX-License-Identifier: Apache-2.0
"""Run silently in every new Python context: inline figures at figsize*dpi and E2B's `e2b/chart`.

share/interp/server.py sends this file as the first (silent) cell. It leaves no names behind in
the user's namespace except the hidden formatter object IPython holds.

Charts: every matplotlib Figure displayed (the inline backend displays each open figure at the
end of a cell) also gets the MIME type `e2b/chart`: the figure's data in the shape of the
@e2b/code-interpreter client's Chart types (line, scatter, bar, pie, superchart for several
axes, unknown otherwise). Extraction failures yield no chart; the PNG still travels.
"""


def _isola_setup():
    import math
    import sys

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    shell = get_ipython()
    # Jupyter's default crops figures (bbox_inches='tight'); E2B users expect figsize*dpi pixels.
    shell.config.InlineBackend.print_figure_kwargs = {"bbox_inches": None}

    def num(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        if math.isnan(f) or math.isinf(f):
            return None
        return int(f) if f.is_integer() and not isinstance(v, float) else f

    def categories(axis):
        # A categorical (string) axis maps each label to 0, 1, ...; invert it.
        units = getattr(axis, "units", None)
        mapping = getattr(units, "_mapping", None)
        if isinstance(mapping, dict) and mapping:
            return {float(v): str(k) for k, v in mapping.items()}
        return None

    def value_on(axis, v):
        cats = categories(axis)
        if cats is not None:
            return cats.get(float(v), num(v))
        return num(v)

    def axis_info(ax, which):
        axis = ax.xaxis if which == "x" else ax.yaxis
        scale = "categorical" if categories(axis) is not None else axis.get_scale()
        ticks = [value_on(axis, t) for t in axis.get_ticklocs()]
        labels = [t.get_text() for t in axis.get_ticklabels()]
        return {f"{which}_ticks": ticks, f"{which}_tick_labels": labels,
                f"{which}_scale": scale}

    def base(ax, kind):
        return {"type": kind, "title": ax.get_title(), "x_label": ax.get_xlabel() or None,
                "y_label": ax.get_ylabel() or None, "x_unit": None, "y_unit": None}

    def label_of(artist, i):
        label = artist.get_label()
        return label if label and not label.startswith("_") else f"series {i}"

    def ax_chart(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.container import BarContainer
        from matplotlib.patches import Wedge

        wedges = [p for p in ax.patches if isinstance(p, Wedge)]
        if wedges:
            return {"type": "pie", "title": ax.get_title(), "elements": [
                {"label": w.get_label(), "angle": num(abs(w.theta2 - w.theta1)),
                 "radius": num(w.r)} for w in wedges]}
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        if bars:
            chart = base(ax, "bar")
            horizontal = getattr(bars[0], "orientation", "vertical") == "horizontal"
            axis = ax.yaxis if horizontal else ax.xaxis
            ticks = list(axis.get_ticklocs())
            labels = [t.get_text() for t in axis.get_ticklabels()]
            elements = []
            for i, c in enumerate(bars):
                group = c.get_label() if c.get_label() and not c.get_label().startswith("_") \
                    else ""
                for r in c.patches:
                    at = r.get_y() + r.get_height() / 2 if horizontal else r.get_x() + r.get_width() / 2
                    val = r.get_width() if horizontal else r.get_height()
                    cats = categories(axis)
                    if cats:
                        name = min(cats.items(), key=lambda kv: abs(kv[0] - at))[1]
                    elif ticks and labels:
                        j = min(range(len(ticks)), key=lambda k: abs(ticks[k] - at))
                        name = labels[j] if j < len(labels) else str(num(at))
                    else:
                        name = str(num(at))
                    elements.append({"label": name, "value": num(val), "group": group})
            chart["elements"] = elements
            return chart
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 0]
        scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
        if lines and not scatters or scatters and not lines:
            chart = base(ax, "line" if lines else "scatter")
            chart.update(axis_info(ax, "x"))
            chart.update(axis_info(ax, "y"))
            elements = []
            for i, art in enumerate(lines or scatters):
                if lines:
                    pts = zip(art.get_xdata(), art.get_ydata())
                else:
                    pts = (tuple(p) for p in art.get_offsets())
                elements.append({"label": label_of(art, i), "points": [
                    [value_on(ax.xaxis, x), value_on(ax.yaxis, y)] for x, y in pts]})
            chart["elements"] = elements
            return chart
        return {"type": "unknown", "title": ax.get_title(), "elements": []}

    def figure_chart(fig):
        fig.canvas.draw()  # tick labels exist only once drawn
        axes = fig.get_axes()
        if not axes:
            return None
        if len(axes) == 1:
            return ax_chart(axes[0])
        title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
        return {"type": "superchart", "title": title, "elements": [ax_chart(a) for a in axes]}

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            mpl = sys.modules.get("matplotlib.figure")
            if mpl is not None and isinstance(obj, mpl.Figure):
                try:
                    return figure_chart(obj)
                except Exception:  # noqa: BLE001 - no chart, the PNG still travels
                    return None
            return super().__call__(obj)

    shell.display_formatter.formatters["e2b/chart"] = ChartFormatter(
        parent=shell.display_formatter)


_isola_setup()
del _isola_setup
