import os

from hypothesis import settings

# No deadlines: these machines are noisy. CI runs a fixed set of examples (derandomized).
settings.register_profile("default", max_examples=25, deadline=None)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
