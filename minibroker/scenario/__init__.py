"""TOML scenarios: the model, the loader, the runner and the expectations; the bundled features (delayed
messages, retries) register their sections and expectations here (``features``)."""

from minibroker.scenario import features as features
from minibroker.scenario.expect import ExpectationResult
from minibroker.scenario.loader import ScenarioError, load_scenario, parse_scenario
from minibroker.scenario.model import Scenario
from minibroker.scenario.run import RunResult, ScenarioRunner, run_scenario

__all__ = [
    "ExpectationResult",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "ScenarioRunner",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
]
