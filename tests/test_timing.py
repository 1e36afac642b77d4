import pandas as pd

from rankcollapse.step_timing import trained_step_sentence
from rankcollapse.timing import median_ratio


def test_the_trained_step_sentence_names_the_range_and_the_costliest_task():
    table = pd.DataFrame({"task": ["text", "mnist", "retrieval"], "ratio": [1.061, 1.264, 1.2]})
    assert trained_step_sentence(table) == (
        "At the trained models' own logits a training step with Sinkhorn attention costs "
        "between 1.06 and 1.26 times the softmax step on this device, the most on MNIST digits.")


def test_median_ratio_pairs_the_rounds():
    assert median_ratio([2.0, 4.0, 9.0], [1.0, 1.0, 3.0]) == 3.0
