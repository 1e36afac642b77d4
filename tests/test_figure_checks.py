"""Every kind of figure the chapters draw, rendered (Agg) from small tables shaped like the
chapters' own, and checked for what a reader needs: at least two readable, non-overlapping
tick labels on every labelled axis, legend handles long enough to show their dashes, panel
titles that do not run into each other, and the rounding floor drawn where values reach it."""

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from rankcollapse import plots  # noqa: E402
from rankcollapse.experiments.rank_collapse import figures as ch1_figures  # noqa: E402
from rankcollapse.experiments.sinkhorn_vs_softmax import figures as ch2_figures  # noqa: E402
from rankcollapse.experiments.linearized_bound import figures as ch3_figures  # noqa: E402
from rankcollapse.experiments.random_matrix_control import figures as ch4_figures  # noqa: E402
from rankcollapse.experiments.trained_models import figures as ch5_figures  # noqa: E402
from rankcollapse.experiments.open_questions import figures as ch6_figures  # noqa: E402

FLOOR = 2.2e-15  # the float64 rounding floor (measures.rounding_floor)
TITLES = {"text": "text classification (stand-in: wordnet4)",
          "mnist": "MNIST digits (stand-in: mnist10k)",
          "cats_dogs": "Cats and Dogs (stand-in: fashion_mnist)",
          "retrieval": "key-value retrieval (this book's task)"}
VARIANTS = ["full model", "without skip", "without LayerNorm", "attention only"]
NORMS = ["softmax", "sinkhorn"]
LAYERS = np.arange(7)


@pytest.fixture(autouse=True)
def style():
    with matplotlib.rc_context():
        plots.use_style()
        yield
    plt.close("all")


# ----------------------------------------------------------------------------- the checks


def labelled_ticks(axis) -> list:
    """The tick labels a drawn `axis` shows: visible, with text, at a tick within the view."""
    low, high = sorted(axis.get_view_interval())
    margin = 1e-9 * (high - low)
    return [t.label1 for t in axis.get_major_ticks() + axis.get_minor_ticks()
            if t.label1.get_visible() and t.label1.get_text().strip()
            and low - margin <= t.get_loc() <= high + margin]


def short_dashed_legends(fig) -> list:
    """Legends of `fig` whose lines differ in dash style with handles too short (under three
    font sizes) to show a dash-dot pattern."""
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + fig.legends
    return [legend for legend in legends
            if len({h.get_linestyle() for h in legend.legend_handles
                    if isinstance(h, matplotlib.lines.Line2D)} - {"None"}) > 1
            and legend.handlelength < 3]


def overlapping(texts) -> list:
    """Pairs of drawn `texts` whose boxes overlap or come closer than a third of their
    height (labels that touch read as one)."""
    boxes = [(t.get_text(), (box := t.get_window_extent()).padded(box.height / 6))
             for t in texts]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
            if box_a.overlaps(box_b)]


def unreadable(fig) -> list[str]:
    """What a reader could not read in `fig` (drawn here): axes with tick labels on but
    fewer than two of them, tick labels or panel titles that overlap, short dashed legends."""
    fig.canvas.draw()
    problems = []
    for ax, which in itertools.product(fig.axes, "xy"):
        axis = getattr(ax, f"{which}axis")
        on = axis.get_tick_params()["labelbottom" if which == "x" else "labelleft"]
        if not on or not len(axis.get_ticklocs()):
            continue  # labels or ticks off by design (shared axes, a colour bar's width)
        labels = labelled_ticks(axis)
        if len(labels) < 2:
            problems.append(f"{which} axis of {ax.get_title()!r}: labels {labels}")
        problems += [f"{which} tick labels overlap: {pair}" for pair in overlapping(labels)]
    problems += [f"titles overlap: {pair}" for pair in
                 overlapping([ax.title for ax in fig.axes if ax.get_title()])]
    problems += [f"short legend handles: {[t.get_text() for t in legend.get_texts()]}"
                 for legend in short_dashed_legends(fig)]
    return problems


def has_floor_line(ax) -> bool:
    return any(line.get_label() == "rounding floor" for line in ax.get_lines())


# ----------------------------------------------------------------------------- the data


def rng(seed=0):
    return np.random.default_rng(seed)


def summary(**keys) -> pd.DataFrame:
    """A `log_summary` table (layer, mean and std of log10 r) per combination of `keys`,
    falling by one decade per layer per unit of the combination's index, to the floor."""
    rows = []
    for i, combo in enumerate(itertools.product(*keys.values())):
        mean = np.maximum(-0.3 - (1 + i % 3) * LAYERS, np.log10(FLOOR))
        rows += [dict(zip(keys, combo), layer=layer, mean=m, std=0.3)
                 for layer, m in zip(LAYERS, mean)]
    return pd.DataFrame(rows)


def comparison(settings, x="depth", values=range(1, 13), low=0.8, high=1.05, **extra):
    """A `stats.compare_table`-like table: ratio with its interval per setting and x."""
    r = rng(1)
    rows = [dict(setting=s, **{x: v}, ratio=ratio, low=ratio * 0.95, high=ratio * 1.05, **extra)
            for s in settings for v, ratio in zip(values, r.uniform(low, high, len(values)))]
    return pd.DataFrame(rows)


def path_boxes() -> pd.DataFrame:
    """Path-product residuals per setting and depth, falling to below the floor."""
    r = rng(2)
    rows = [dict(setting=f"{title}, full model", normalization=name, depth=k,
                 residual=max(10.0 ** (-1.3 * k) * r.lognormal(0, 1), FLOOR / 20))
            for title in TITLES.values() for name in NORMS for k in range(1, 16)
            for _ in range(8)]
    return pd.DataFrame(rows)


RESIDUAL_GROUPS = {"with skip connections": {"full model": "-", "without LayerNorm": "--"},
                   "without": {"without skip": "-", "attention only": "--"}}


def narrow_summary() -> pd.DataFrame:
    """Residuals between about 0.6 and 1 (trained models with skip connections) and some
    falling to the floor (without)."""
    rows = []
    for (t, v, name) in itertools.product(TITLES, VARIANTS, NORMS):
        skip = v in RESIDUAL_GROUPS["with skip connections"]
        mean = (np.log10(0.95 - 0.04 * LAYERS) if skip
                else np.maximum(-0.3 - 2 * LAYERS, np.log10(FLOOR)))
        rows += [dict(task=t, variant=v, normalization=name, layer=layer, mean=m, std=0.02)
                 for layer, m in zip(LAYERS, mean)]
    return pd.DataFrame(rows)


def depth_bound_table() -> pd.DataFrame:
    rows = []
    for s, name in itertools.product((0.1, 0.3), NORMS):
        log_r = np.log10(s) * 3.0 ** np.arange(6) - (name == "sinkhorn") * 0.1
        rows += [dict(start=s, normalization=name, layer=layer, log10_residual=v,
                      log10_bound=0.8 * v + 1) for layer, v in enumerate(log_r)]
    return pd.DataFrame(rows)


def lipschitz_tables(trained_range=(0.95, 1.1)):
    r = rng(3)
    random = pd.DataFrame([dict(n=n, logit_std=s, draw=d, normalization=name,
                                lipschitz=(2 + s**2 * (3 if name == "softmax" else 2)) * r.uniform(0.9, 1.1))
                           for n in (16, 32) for s in (0.5, 1, 2, 4) for d in range(5)
                           for name in NORMS])
    trained = pd.DataFrame([dict(task=t, normalization=name, layer=layer, seed=seed,
                                 lipschitz=r.uniform(*trained_range))
                            for t in TITLES for name in NORMS for layer in (1, 3, 6)
                            for seed in range(3)])
    return random, trained


def figures():
    """Name -> a function drawing that kind of figure the way a chapter calls it."""
    r = rng()
    curves = pd.DataFrame([dict(scale=s, half_steps=h, full_iterations=h // 2,
                                row_error=10.0 ** (-h / (2 * s)), column_error=10.0 ** (-h / (3 * s)))
                           for s in (1, 2, 4) for h in range(1, 41)])
    lin = pd.DataFrame([dict(normalization=name, eps=e, error=e**2 * (1 + (name == "softmax")))
                        for name in NORMS for e in np.geomspace(1e-4, 1e-1, 7)])
    guide = pd.DataFrame([dict(x=e, y=e**2, label="slope 2", style="--")
                          for e in np.geomspace(1e-4, 1e-1, 7)])
    learning = pd.DataFrame([dict(task=t, normalization=name, seed=seed, epoch=e,
                                  heldout_loss=2.0 / e, heldout_accuracy=1 - 0.5 / e,
                                  chance=0.1, baseline=0.6)
                             for t in TITLES for name in NORMS for seed in range(2)
                             for e in range(1, 9)])
    attention = pd.DataFrame([dict(task=t, normalization=name, layer=layer, logit_std=1 + layer,
                                   marginal_error=10.0 ** -(3 + layer), entropy=2 - 0.1 * layer)
                              for t in TITLES for name in NORMS for layer in range(6)])
    sweep = pd.DataFrame([dict(task=t, seed=seed, iterations=it, accuracy=0.9 - 0.1 / it,
                               row_error=10.0 ** -it / 3, ms=10 + it)
                          for t in TITLES for seed in range(2) for it in (0.5, 1, 2, 5, 10, 20, 50)])
    regime = pd.DataFrame([dict(normalization=name, logit_std=s, logit_norm=n * s,
                                ratio=1 + 0.1 * n * s, looseness=3 + n * s)
                           for name in NORMS for s in (0.5, 1) for n in (0.1, 0.3, 1, 3)])
    return {
        "residual_bands": lambda: plots.residual_bands(summary(logit_std=(0.5, 1, 2)), "logit_std",
                                                       "logit scale {:g}", floor=FLOOR),
        "residual_bands_styles": lambda: plots.residual_bands(
            summary(normalization=NORMS, logit_std=(1, 4)), "normalization",
            "{}, logit scale {:g}", style="logit_std", floor=FLOOR),
        "digits_lost": lambda: ch1_figures.digits_lost(pd.DataFrame(
            [dict(logit_std=s, layer=layer, lost=s * 3.0**layer, low=0.8 * s * 3.0**layer,
                  high=1.2 * s * 3.0**layer) for s in (1, 2) for layer in range(1, 5)])),
        "rank_and_entropy": lambda: ch1_figures.rank_and_entropy(
            summary(label=["attention", "with skip"]),
            summary(label=["attention", "with skip"]).assign(mean=lambda d: 2 - 0.1 * d.layer),
            np.log(16)),
        "convergence_lines": lambda: ch2_figures.convergence_lines(curves, 10),
        "heatmap_pair": lambda: ch2_figures.heatmap_pair({name: r.dirichlet(np.ones(6), 6) for name in
                                            ("softmax", "Sinkhorn")}),
        "paired_boxes": lambda: plots.paired_boxes(pd.DataFrame(
            [dict(scale=s, normalization=name, entropy=2 - 0.2 * s + r.normal(0, 0.1))
             for s in (0.5, 1, 2) for name in NORMS for _ in range(10)]), "scale", "entropy",
            xlabel="logit scale $\\sigma$", ylabel="row entropy (nats)"),
        "cost_lines": lambda: ch2_figures.cost_lines(pd.DataFrame(
            {"softmax": [1e-5, 2e-5, 8e-5], "sinkhorn": [1e-4, 3e-4, 1e-3],
             "loop": [1e-3, 4e-3, 2e-2]}, index=[16, 64, 256])),
        "loglog_points": lambda: ch3_figures.loglog_points(lin, "eps", "error", {}, "logit scale",
                                                     "error", guide=guide),
        "depth_bound_lines": lambda: ch3_figures.depth_bound_lines(depth_bound_table()),
        "regime_points": lambda: ch3_figures.regime_points(regime),
        "gap_line": lambda: ch3_figures.gap_line(pd.Series([1e-4, 1e-3, 1e-2], index=[0.01, 0.1, 1])),
        "boxes_by": lambda: plots.boxes_by(path_boxes(), "setting", "depth",
                                           ylabel="rank-1 residual", floor=FLOOR),
        "ratio_figure": lambda: plots.ratio_figure(comparison(
            [f"{kind}, logit scale {s}" for kind in ("pure", "skip + LN", "independent")
             for s in (1, 4)])),
        "sweep_figure": lambda: ch4_figures.sweep_figure(pd.concat(
            [comparison([None], "logit_std", (0.5, 1, 2, 4), 0.5, 3, depth=k, n=n)
             for k in (2, 8) for n in (16, 64)])),
        "ratio_panels": lambda: plots.ratio_panels(pd.concat(
            [comparison(["trained with softmax", "trained with Sinkhorn"], "layer", range(1, 7),
                        task=t) for t in TITLES]), TITLES, x="layer", xlabel="layer"),
        "learning_curves": lambda: ch5_figures.learning_curves(learning, TITLES),
        "task_panels": lambda: plots.task_panels(
            summary(task=list(TITLES), variant=VARIANTS[:1], normalization=NORMS), TITLES,
            "relative residual", {"full model": "-"}, floor=FLOOR),
        "task_panels_groups": lambda: plots.task_panels(
            summary(task=list(TITLES), variant=VARIANTS, normalization=NORMS), TITLES,
            "relative residual", floor=FLOOR, groups=RESIDUAL_GROUPS),
        "task_panels_narrow": lambda: plots.task_panels(
            narrow_summary(), TITLES, "relative residual", floor=FLOOR,
            groups=RESIDUAL_GROUPS),
        "trained_attention_figure": lambda: ch5_figures.trained_attention_figure(attention, TITLES,
                                                                                  50),
        "iterations_figure": lambda: ch6_figures.iterations_figure(sweep, TITLES),
        "lipschitz_figure": lambda: ch6_figures.lipschitz_figure(*lipschitz_tables(), TITLES),
    }


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("kind", list(figures()))
def test_figure_is_readable(kind):
    assert unreadable(figures()[kind]()) == []


@pytest.mark.parametrize("kind", list(figures()))
def test_figure_fits_the_page(kind):
    """The book shows figures at most about 750 px wide: a wider figure is scaled down and
    its labels with it, so no figure is wider than `plots.WIDTH` inches."""
    assert figures()[kind]().get_size_inches()[0] <= plots.WIDTH + 1e-9


def test_narrow_residuals_get_a_linear_axis_shared_down_each_column():
    fig = plots.task_panels(narrow_summary(), TITLES, "r", floor=FLOOR, groups=RESIDUAL_GROUPS)
    left, right = fig.axes[0::2], fig.axes[1::2]
    assert {ax.get_yscale() for ax in left} == {"linear"}
    assert {ax.get_yscale() for ax in right} == {"log"}
    assert len({ax.get_ylim() for ax in left}) == 1 and len({ax.get_ylim() for ax in right}) == 1


def test_a_line_style_shared_by_two_columns_is_one_legend_entry_naming_both():
    """Chapter 5's figure: with skips the full model is solid and the next variant dashed;
    without skips likewise: one entry per style, each variant named with its column."""
    fig = plots.task_panels(narrow_summary(), TITLES, "r", floor=FLOOR, groups=RESIDUAL_GROUPS)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert "full model (left), without skip (right)" in labels
    assert "without LayerNorm (left), attention only (right)" in labels
    assert not {"full model", "without skip", "attention only"} & set(labels)


def test_checks_catch_short_handles_one_tick_and_crowded_labels():
    """The checks fail on what this book's figures once showed: the Lipschitz legend at the
    default handle length, a log axis with the single label 1, crowded 0.8, 0.9, 1."""
    matplotlib.rcParams["legend.handlelength"] = 2.0
    fig = ch6_figures.lipschitz_figure(*lipschitz_tables(), TITLES)
    assert any("short legend handles" in p for p in unreadable(fig))
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.2, 2])
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    assert any("tick labels overlap" in p for p in unreadable(fig))
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.75, 1.3])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 1.5, 2, 3, 5, 7)))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    assert any("y axis" in p for p in unreadable(fig))


@pytest.mark.parametrize("trained_range", [(0.95, 1.1), (0.75, 1.4), (0.8, 5)])
def test_lipschitz_short_log_ranges_show_two_labels(trained_range):
    fig = ch6_figures.lipschitz_figure(*lipschitz_tables(trained_range), TITLES)
    assert unreadable(fig) == []


def test_depth_bound_labels_are_evenly_spaced_powers_of_ten():
    fig = ch3_figures.depth_bound_lines(depth_bound_table())
    fig.canvas.draw()
    ticks = [label.get_position()[1] for label in labelled_ticks(fig.axes[0].yaxis)]
    steps = set(np.round(np.diff(np.log10(ticks)), 6))
    assert len(steps) == 1 and steps.pop() in {1, 2, 5, 10, 20, 50, 100}
    assert np.allclose(np.log10(ticks), np.round(np.log10(ticks)))


@pytest.mark.parametrize("low, high", [(0.8, 1.05), (0.5, 1.3), (0.2, 2), (0.05, 3), (1e-3, 20)])
def test_ratio_labels_do_not_crowd(low, high):
    fig = plots.ratio_figure(comparison(["pure", "skip + LN"], low=low, high=high))
    assert unreadable(fig) == []


def test_floor_line_where_values_reach_the_floor():
    boxes = plots.boxes_by(path_boxes(), "setting", "depth", floor=FLOOR)
    assert all(has_floor_line(ax) for ax in boxes.axes)
    # one legend for the figure, off the data (below the panels: none inside a panel)
    assert all(ax.get_legend() is None for ax in boxes.axes)
    assert "rounding floor" in [t.get_text() for t in boxes.legends[0].get_texts()]
    far = path_boxes().query("depth < 5")
    assert not any(has_floor_line(ax) for ax in plots.boxes_by(far, "setting", "depth",
                                                               floor=FLOOR).axes)
    panels = plots.task_panels(summary(task=list(TITLES), variant=VARIANTS,
                                       normalization=NORMS), TITLES, "r", floor=FLOOR,
                               groups=RESIDUAL_GROUPS)
    assert all(has_floor_line(ax) for ax in panels.axes)
    bands = plots.residual_bands(summary(logit_std=(1, 2)), "logit_std", floor=FLOOR)
    assert has_floor_line(bands.axes[0])


def test_curves_of_a_normalization_take_its_colour():
    """fig-swapped's curves are the weights' training normalization: blue and red."""
    assert plots.colors(["trained with softmax", "trained with Sinkhorn"]) == {
        "trained with softmax": "#1f77b4", "trained with Sinkhorn": "#d62728"}
    assert set(plots.colors(["pure, logit scale 1", "pure, logit scale 4"]).values()) <= set(
        plots.OTHER_COLORS)
    assert set(plots.colors(["softmax, n = 16", "softmax, n = 32"]).values()) <= set(
        plots.OTHER_COLORS)  # two keys of one normalization: one colour would hide a curve


def test_forest_side_labels_do_not_overlap():
    """A part's label on the right gets the rows it needs: B5's two one-row parts, each with
    a three-line label, are drawn apart (bounding boxes in display coordinates)."""
    from rankcollapse.registry import CLAIMS
    from rankcollapse_book.forest import forest

    def rows(claim_id, tasks):  # a realistic density: the book's other questions above
        return {"id": claim_id, "results": [
            dict(part=p.name, task=task, number=1.2, low=1.0, high=1.4, found="more",
                 outcome="agrees", units=[5], at=None, level=0.975)
            for p in CLAIMS[claim_id].parts for task in tasks]}

    fig, _ = forest([rows("C10", [f"task {i}" for i in range(5)]),
                     rows("B3", ["MNIST digits", "retrieval"]), rows("B5", ["MNIST digits"])])
    fig.canvas.draw()
    ax = fig.axes[0]
    boxes = sorted((t.get_window_extent() for t in ax.texts if "depth sweep" in t.get_text()),
                   key=lambda b: -b.y1)
    assert len(boxes) == 2 and all(b.height > 0 for b in boxes)
    assert boxes[0].y0 >= boxes[1].y1  # the upper label ends above the lower one


def test_the_forest_plots_only_tests_with_an_interval():
    """A test without an interval (mostly tied at the floor) is not drawn as if it were an
    estimate: its caption promises intervals, and the ledger's tables say why it has none."""
    from rankcollapse.verdicts import Result
    from rankcollapse_book.forest import forest_rows

    part = "trained models"
    with_interval = Result(part, "MNIST digits", 1.5, "more", "agrees", 1.2, 1.9, 0.975, (5,),
                           1.3).record()
    without = Result(part, "key-value retrieval", 0.7, "undecided", "undecided", None, None,
                     0.975, (5,)).record()
    table = forest_rows([{"id": "C4a", "results": [with_interval, without]}])
    assert list(table["task"]) == ["MNIST digits"]
