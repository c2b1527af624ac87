"""The production DAG: compiled per profile, GPU stages placed on the GPU pool, stages left out when off."""

from __future__ import annotations

import json

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.errors import ConfigError

GPU_STAGES = {"pretrain", "tune-worker", "train", "peft-compare"}  # every pretraining stage runs as `pretrain`


def _compile(tmp_path, *args: str) -> tuple[dict, dict]:
    output = tmp_path / "pipeline.yaml"
    main(["pipeline", "compile", *args, "-o", str(output)])
    docs = list(yaml.safe_load_all(output.read_text()))
    return docs[0], (docs[1] if len(docs) > 1 else {})


def _component(executor: str) -> str:
    name = executor.removeprefix("exec-")
    return name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name


def test_full_profile_puts_every_gpu_stage_on_the_gpu_pool(tmp_path):
    ir, platform = _compile(tmp_path, "--profile", "full")
    executors = ir["deploymentSpec"]["executors"]
    placed = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    gpu = [e for e in executors if _component(e) in GPU_STAGES]
    assert {_component(e) for e in gpu} == GPU_STAGES
    for executor in gpu:
        resources = executors[executor]["container"]["resources"]
        assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu", executor
        assert int(resources["accelerator"]["resourceCount"]) >= 1
        assert resources["resourceCpuRequest"] and resources["resourceMemoryLimit"]
        # inside the ParallelFor the parameter arrives as pipelinechannel--<name>
        selector = placed[executor]["nodeSelector"]["nodeSelectorJson"]["componentInputParameter"]
        toleration = placed[executor]["tolerations"][0]["tolerationJson"]["componentInputParameter"]
        assert selector.endswith("gpu_node_selector") and toleration.endswith("gpu_toleration")
    for executor in set(executors) - set(gpu):  # evaluation, registration, collection: no GPU
        assert "accelerator" not in executors[executor]["container"].get("resources", {}), executor
    params = ir["root"]["inputDefinitions"]["parameters"]
    assert {"gpu_node_selector", "gpu_toleration", "eval_episodes", "eval_seed"} <= set(params)


def test_retries_on_training_and_caching_only_where_inputs_decide(tmp_path):
    ir, _ = _compile(tmp_path, "--profile", "full")
    tasks = ir["root"]["dag"]["tasks"]
    assert tasks["train"]["retryPolicy"]["maxRetryCount"] == 2
    assert tasks["train-2"]["taskInfo"]["name"] == "curriculum training"
    assert tasks["train-2"]["retryPolicy"]["backoffFactor"] == 2.0
    assert tasks["train-2"]["inputs"]["artifacts"]["pretrained"]["taskOutputArtifact"]["producerTask"] == "pretrain-2"
    assert tasks["collect-rollouts"]["cachingOptions"]["enableCache"] is True
    assert tasks["pretrain-2"]["cachingOptions"]["enableCache"] is True
    assert tasks["pretrain-2"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "latent"
    assert not tasks["tune-best"]["cachingOptions"].get("enableCache", False)
    promotions = [name for name in tasks if name.startswith("evaluate-and-register")]
    assert len(promotions) == 4  # one sub-pipeline per registered model: policy, latent, PEFT source and adapted
    for name in promotions:
        assert not tasks[name]["cachingOptions"].get("enableCache", False), name
        inner = ir["components"][tasks[name]["componentRef"]["name"]]["dag"]["tasks"]
        assert set(inner) == {"evaluate", "register"}
        assert not any(task["cachingOptions"].get("enableCache", False) for task in inner.values()), name
    loop = tasks["for-loop-2"]
    assert loop["parameterIterator"]["items"]["raw"] == "[0, 1, 2, 3]"  # four Optuna workers share one study
    assert "for-loop-2" in tasks["tune-best"]["dependentTasks"]
    assert tasks["train"]["inputs"]["parameters"]["tuned"]["taskOutputParameter"]["producerTask"] == "tune-best"
    assert "pretrain" in loop["dependentTasks"]  # every trial starts from the pretrained evaluator
    assert tasks["pretrain"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "pivot"
    assert tasks["train"]["inputs"]["artifacts"]["pretrained"]["taskOutputArtifact"]["producerTask"] == "pretrain"


def test_peft_branch_registers_the_best_adapted_policy_through_the_gate(tmp_path):
    ir, _ = _compile(tmp_path, "--profile", "full")
    tasks = ir["root"]["dag"]["tasks"]
    registered = {
        name: task["inputs"]["artifacts"]["model"]["taskOutputArtifact"]
        for name, task in tasks.items()
        if name.startswith("evaluate-and-register")
    }
    adapted = [name for name, source in registered.items() if source["producerTask"] == "peft-compare"]
    assert len(adapted) == 1 and registered[adapted[0]]["outputArtifactKey"] == "best"
    gate = tasks[adapted[0]]["inputs"]["parameters"]
    assert gate["model_name"]["runtimeValue"]["constant"] == "halfcheetah-policy-adapted"
    inner = ir["components"][tasks[adapted[0]]["componentRef"]["name"]]["dag"]["tasks"]
    # the gate reads an evaluation of the same policy, inside the sub-pipeline
    returns = inner["register"]["inputs"]["parameters"]["eval_returns"]
    assert returns["taskOutputParameter"]["producerTask"] == "evaluate"
    assert inner["register"]["inputs"]["artifacts"]["model"] == inner["evaluate"]["inputs"]["artifacts"]["model"]
    assert "peft_promotion" in tasks["report"]["inputs"]["artifacts"]


def test_a_stage_can_set_its_own_gate_episodes(tmp_path, capsys):
    """The quick profile's Atari gate plays 30 full games; its other gates take the pipeline's parameter."""
    ir, _ = _compile(tmp_path, "--profile", "quick")
    gates = {
        task["inputs"]["parameters"]["model_name"]["runtimeValue"]["constant"]: task["inputs"]["parameters"]
        for name, task in ir["root"]["dag"]["tasks"].items()
        if name.startswith("evaluate-and-register")
    }
    assert gates["roadrunner-policy"]["eval_episodes"]["runtimeValue"]["constant"] == 30
    assert gates["cartpole-policy"]["eval_episodes"]["componentInputParameter"] == "eval_episodes"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "bad", "stages": {"train": {"config": "configs/cartpole-ppo.yaml",
                                   "model_name": "cartpole-policy", "eval_episodes": 1}}}))  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        _compile(tmp_path, "--profile", str(bad))
    assert exited.value.code == 2
    assert "stages.train.eval_episodes = 1: Input should be greater than or equal to 2" in capsys.readouterr().err
    bad.write_text(yaml.safe_dump({"name": "bad", "stages": {"train": {"config": "configs/cartpole-ppo.yaml",
                                   "model_name": "cartpole-policy", "eval_episodes": 3}}}))  # fmt: skip
    with pytest.raises(SystemExit):
        _compile(tmp_path, "--profile", str(bad))
    refused = capsys.readouterr().err
    assert "fewer than its config's promotion.min_episodes 5, so its gate could never promote" in refused


def test_quick_profile_has_no_gpu_settings_and_disabled_stages_are_absent(tmp_path):
    ir, platform = _compile(tmp_path, "--profile", "quick")
    executors = ir["deploymentSpec"]["executors"]
    assert all("accelerator" not in e["container"].get("resources", {}) for e in executors.values())
    assert not platform or not platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    custom = tmp_path / "no-tune.yaml"
    custom.write_text(yaml.safe_dump({"name": "lean", "stages": {"train": {"config": "configs/cartpole-ppo.yaml",
                                      "model_name": "cartpole-policy"}}}))  # fmt: skip
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    # no pivot, tune, latent or peft stage
    assert set(ir["root"]["dag"]["tasks"]) == {"train", "evaluate-and-register", "report"}


def test_profile_stage_without_a_logged_model_is_a_clear_error(tmp_path):
    from pipelines.production import load_profile

    custom = tmp_path / "untracked.yaml"
    custom.write_text(yaml.safe_dump({"name": "x", "stages": {"peft": {"config": "configs/peft-quick.yaml",
                                      "model_name": "p"}}}))  # fmt: skip
    with pytest.raises(ConfigError, match="logs no MLflow model; add tracking.enabled=true"):
        load_profile(str(custom))


def test_unknown_profile_is_a_clear_error(tmp_path):
    from pipelines.production import load_profile

    with pytest.raises(ConfigError, match="known profiles: \\['full', 'quick'\\]"):
        load_profile("nope")


def test_report_has_curves_costs_decisions_and_peft(tmp_path):
    """The report stage's library call on real run directories."""
    from frugalrl.ops.steps import report_step
    from frugalrl.train import train

    from .conftest import tiny_config

    run = tmp_path / "run"
    train(tiny_config(), run, interactive=False)
    decision = "# cartpole-policy version 3\n\n- decision: kept as **challenger**\n- reason: `Welch` p = 0.3"
    peft_like = tmp_path / "no-policy"  # a run directory without a policy gets no video and breaks nothing
    peft_like.mkdir()
    (peft_like / "summary.json").write_text((run / "summary.json").read_text())
    branches = [{"runs": {"no policy": str(peft_like), "policy": str(run)}, "decisions": [decision]}]
    baseline_free = report_step(branches, str(tmp_path / "report.html"))
    text = (tmp_path / "report.html").read_text()
    assert baseline_free["mlflow_run_id"] is None
    assert "<h2>CartPole-v1: PPO</h2>" in text  # the branch is titled by its task and algorithm
    assert "<h3>Learning curve</h3>" in text and "data:image/png;base64," in text
    assert "Cost per stage" in text
    # Markdown becomes HTML, not a preformatted block of source
    assert "<li>decision: kept as <strong>challenger</strong></li>" in text and "<code>Welch</code>" in text
    assert "<pre>" not in text and "**" not in text
    # the policy plays in the page: its recorded episode, inline
    assert "data:image/gif;base64," in text and "policy: episode from seed 10000" in text
    assert (tmp_path / "videos" / "policy.gif").is_file()
    from frugalrl.ops.report import Branch, RunInput, build_report

    with_baseline = build_report([Branch("pivot", [RunInput("pivot", run)])], baseline=RunInput("ppo", run))
    assert "FLOPs / baseline" in with_baseline and "1.000" in with_baseline
    ir, _ = _compile(tmp_path, "--profile", "full")
    inputs = ir["root"]["dag"]["tasks"]["report"]["inputs"]["artifacts"]
    assert {"policy", "promotion", "encoder", "latent_policy", "latent_promotion", "peft_source",
            "peft_source_promotion", "peft_adapted", "peft_comparison", "peft_promotion"} == set(inputs)  # fmt: skip


def test_multi_worker_training_on_gpu_becomes_a_pytorchjob_stage(tmp_path):
    custom = tmp_path / "dist.yaml"
    custom.write_text(yaml.safe_dump({"name": "dist", "gpu": True, "stages": {"train": {
        "config": "configs/cartpole-ppo.yaml", "overrides": ["distributed.workers=4"],
        "model_name": "cartpole-policy"}}}))  # fmt: skip
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    tasks = ir["root"]["dag"]["tasks"]
    assert "train-distributed" in tasks and "train" not in tasks
    params = tasks["train-distributed"]["inputs"]["parameters"]
    assert params["node_selector"]["componentInputParameter"] == "gpu_node_selector"
    assert params["namespace"]["componentInputParameter"] == "training_namespace"
    producer = tasks["evaluate-and-register"]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]["producerTask"]
    assert producer == "train-distributed"


def test_report_markdown_becomes_tables_lists_and_headings():
    from frugalrl.ops.report import _markdown

    source = "# PEFT\n\n| method | return |\n| --- | ---: |\n| lora | **76.7** |\n\n- one `x`\n- two\n\ntext <b>"
    html = _markdown(source)
    assert html == (
        "<h3>PEFT</h3><table><tr><th>method</th><th>return</th></tr><tr><td>lora</td>"
        "<td><strong>76.7</strong></td></tr></table><ul><li>one <code>x</code></li><li>two</li></ul>"
        "<p>text &lt;b&gt;</p>"
    )


def test_report_plots_the_world_model_against_real_play_for_latent_runs(tmp_path):
    from frugalrl.ops.report import Branch, RunInput, build_report

    # RoadRunner's latents barely move: the model's 16-step error there was 2.2x copy-last's, both under 1e-5
    quality = {"wm_horizon_k": 16.0, "wm_latent_error_k": 3.7556e-06, "wm_latent_error_k_copy": 1.6696e-06,
               "wm_reward_accuracy": 0.97, "wm_reward_accuracy_nonzero": None, "wm_done_accuracy": 0.99,
               "wm_imagined_return": 0.5, "wm_real_return": 1.25, "wm_imagined_events": 0.07, "wm_real_events": 0.2,
               "wm_reward_auc": 0.55, "wm_gate": "failed", "wm_gate_reason": "reward AUC 0.55 < 0.80"}  # fmt: skip
    for name, extra in (("latent", quality), ("pixel", {})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"algo": "ppo", "eval_mean": 1.0, **extra}))
    runs = [RunInput("latent", tmp_path / "latent"), RunInput("pixel", tmp_path / "pixel")]
    text = build_report([Branch("latent", runs)])
    section = text.split("<h3>World model against real play</h3>")[1]
    assert "3.76e-06 / 1.67e-06" in section and "0.50 / 1.25" in section and "0.970 (-)" in section
    assert "0.07 / 0.20" in section and "failed: reward AUC 0.55 &lt; 0.80" in section  # the diagnostic gate
    assert "data:image/png;base64," in section and "<td>pixel</td>" not in section  # only runs that have one
    assert "World model against real play" not in build_report([Branch("pixel", runs[1:])])
