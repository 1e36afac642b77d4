"""The `full` profile's models at the paper's shapes (24 layers, width 128, 4 heads; 128 text
tokens, 4x4 and 16x16 patches) train a few steps and run one analysis pass, on small random
data of the real datasets' shapes, on the CPU (about ten seconds in all)."""

from dataclasses import replace

import pytest
import torch

from rankcollapse import tasks
from rankcollapse.experiments import trained_models as tm
from rankcollapse.profiles import get_profile
from rankcollapse.training import train

FULL = get_profile("full")


@pytest.mark.parametrize("role", list(FULL.tasks))
def test_full_profile_model_trains_and_is_analysed(role, tmp_path):
    task = replace(FULL.tasks[role], epochs=1, batch_size=4, warmup_steps=1)
    assert (task.depth, task.d_model, task.n_heads) == (24, 128, 4)
    data, test = tasks.synthetic_data(task, 8, seed=0), tasks.synthetic_data(task, 4, seed=1)
    models = {}
    for name in ("softmax", "sinkhorn"):
        result = train(tasks.train_config(task, data, name, seed=0,
                                          n_iter=FULL.n_iter), data, test, tmp_path, "cpu",
                       quiet=True)
        assert result.steps == 2 and all(torch.isfinite(torch.tensor(result.losses)))
        models[(name, 0)] = result.model
    analysis = tm.analyse({role: models}, {role: test}, n_eval=4, n_paths=3, seed=0,
                          n_iter=FULL.n_iter, path_variants=("full model",))
    hidden, paths = analysis.hidden, analysis.paths
    assert hidden.layer.max() == 24 and hidden.residual.notna().all()
    assert set(paths.depth) == set(range(1, 25))
    tokens = {"text": 128, "mnist": 1 + 7 * 7, "cats_dogs": 1 + 8 * 8, "retrieval": 17}[role]
    # the shape of the random control: images keep every token, text its real ones (median)
    real = tokens if test.mask is None else int(test.mask[:4].sum(1).median())
    assert analysis.shapes[role] == (24, 4, real)
    models = {name: model for (name, _), model in models.items()}
    assert models["sinkhorn"].encoder(models["sinkhorn"].embed(test.x[:1]),
                                      None if test.mask is None else test.mask[:1],
                                      record=True).attention.shape[-1] == tokens
