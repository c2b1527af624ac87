"""The production DAG: compiled per profile, GPU stages placed on the GPU pool, stages left out when off."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.errors import ConfigError

CPU_IMAGE = "registry.example.com/frugalrl@sha256:" + "c" * 64  # pinned fakes: a registry host and a digest
CUDA_IMAGE = "registry.example.com/frugalrl-cuda@sha256:" + "d" * 64
IMAGES = ("--image", CPU_IMAGE, "--cuda-image", CUDA_IMAGE)
LIGHT = {"evaluate", "register", "report", "tune-best", "train-distributed", "race-decide"}  # the light class
TUNE = {"tune-worker", "tune-best"}  # the steps that open the shared Optuna study


def _compile(tmp_path, *args: str, images: tuple[str, ...] = IMAGES) -> tuple[dict, dict]:
    output = tmp_path / "pipeline.yaml"
    main(["pipeline", "compile", *args, *images, "-o", str(output)])
    docs = list(yaml.safe_load_all(output.read_text()))
    return docs[0], (docs[1] if len(docs) > 1 else {})


def _component(executor: str) -> str:
    name = executor.removeprefix("exec-")
    return name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name


def _executor(ir: dict, task: str) -> str:
    """The executor a root task of the DAG runs."""
    return ir["components"][ir["root"]["dag"]["tasks"][task]["componentRef"]["name"]]["executorLabel"]


def _placed(platform: dict) -> dict:
    return platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def _secret_env(placed: dict) -> dict[str, tuple[str, bool]]:
    """Environment variable -> (the Secret it comes from, optional) for one executor's platform spec."""
    return {
        key["envVar"]: (entry["secretName"], entry["optional"])
        for entry in placed.get("secretAsEnv", [])
        for key in entry["keyToEnv"]
    }


def test_full_profile_puts_only_the_gpu_stages_on_the_gpu_pool(tmp_path):
    """full: the Breakout encoder's pretraining and the curriculum training (``device=auto`` on pixels) ask
    for a GPU; the LunarLander evaluator, tuning, training and the MuJoCo PEFT branch run on the CPU pool."""
    ir, platform = _compile(tmp_path, "--profile", "full")
    executors, placed = ir["deploymentSpec"]["executors"], _placed(platform)
    tasks = ir["root"]["dag"]["tasks"]
    assert tasks["pretrain-2"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "latent"
    assert tasks["train-2"]["taskInfo"]["name"] == "curriculum training"
    gpu = {_executor(ir, "pretrain-2"), _executor(ir, "train-2")}
    asking = {name for name, e in executors.items() if "accelerator" in e["container"].get("resources", {})}
    assert asking == gpu
    for executor in gpu:
        resources = executors[executor]["container"]["resources"]
        assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu", executor
        assert int(resources["accelerator"]["resourceCount"]) == 1
        assert (resources["resourceCpuRequest"], resources["resourceMemoryLimit"]) == ("4", "32G")
        # the pool comes from pipeline parameters a run can override
        selector = placed[executor]["nodeSelector"]["nodeSelectorJson"]["componentInputParameter"]
        toleration = placed[executor]["tolerations"][0]["tolerationJson"]["componentInputParameter"]
        assert (selector, toleration) == ("gpu_node_selector", "gpu_toleration")
    for executor in set(executors) - gpu:  # evaluation, registration, collection, CPU training: not on the GPU pool
        assert "nodeSelector" not in placed[executor] and "tolerations" not in placed[executor], executor
    for cpu_stage in ("pretrain", "train", "train-3", "peft-compare"):  # LunarLander evaluator and policy, PEFT
        assert _executor(ir, cpu_stage) not in gpu, cpu_stage
    params = ir["root"]["inputDefinitions"]["parameters"]
    assert {"gpu_node_selector", "gpu_toleration", "eval_episodes", "eval_seed", "seed"} <= set(params)
    assert params["seed"]["defaultValue"] == 0  # each config's own seed unless a run passes another
    assert tasks["train"]["inputs"]["parameters"]["seed"]["componentInputParameter"] == "seed"


def _class_of(executor: str, gpu: set[str]) -> str:
    if executor in gpu:
        return "gpu"
    if _component(executor) == "race-run":
        return "race"
    return "light" if _component(executor) in LIGHT else "cpu"


@pytest.mark.parametrize(
    ("profile", "images", "gpu_tasks"),
    [
        ("full", IMAGES, {"pretrain-2", "train-2"}),  # the Breakout encoder and curriculum training
        ("quick", ("--image", CPU_IMAGE), set()),  # every config on the CPU: no --cuda-image needed
    ],
)
def test_a_compiled_profile_is_ready_for_a_cluster(tmp_path, capsys, profile, images, gpu_tasks):
    """The issue's acceptance: tracking from a Secret, GPUs only where a stage's config runs on one, requests,
    limits and a deadline on every step, and every image pinned by registry and digest."""
    from frugalrl.pipelines.production import load_profile

    from frugalrl.ops.images import is_pinned

    loaded = load_profile(profile)
    ir, platform = _compile(tmp_path, "--profile", profile, images=images)
    said = capsys.readouterr().out
    assert f"image: {CPU_IMAGE} (from --image)" in said and "not pinned" not in said
    executors, placed = ir["deploymentSpec"]["executors"], _placed(platform)
    assert set(placed) == set(executors)  # every step has its Kubernetes placement
    gpu = {_executor(ir, task) for task in gpu_tasks}
    # the stages whose config runs on a GPU (device cuda, or auto on pixels) are the ones that ask for it
    assert loaded.gpu_stages() == ([loaded.latent] if gpu_tasks else [])
    assert [loaded.stage_config(s).device for s in loaded.gpu_stages()] == (["auto"] if gpu_tasks else [])
    assert {"gpu_node_selector", "gpu_toleration"} <= set(ir["root"]["inputDefinitions"]["parameters"])
    for name, executor in executors.items():
        container, spec = executor["container"], placed[name]
        secrets = _secret_env(spec)
        assert secrets["MLFLOW_TRACKING_URI"] == ("frugalrl-tracking", False), name  # required, never inlined
        assert secrets["MLFLOW_TRACKING_TOKEN"] == ("frugalrl-tracking", True), name  # credentials when present
        assert not any(e["name"] == "MLFLOW_TRACKING_URI" for e in container.get("env", [])), name
        assert {"name": "FRUGALRL_TRACKING_SECRET", "value": "frugalrl-tracking"} in container["env"], name
        if _component(name) in TUNE:
            assert secrets["OPTUNA_STORAGE"] == ("frugalrl-tracking", False), name
        else:
            assert "OPTUNA_STORAGE" not in secrets, name
        resources = container["resources"]
        assert ("accelerator" in resources) == (name in gpu), name
        stage_class = getattr(loaded.resources, _class_of(name, gpu))
        assert (resources["resourceCpuRequest"], resources["resourceCpuLimit"]) == (
            stage_class.cpu_request, stage_class.cpu_limit), name  # fmt: skip
        assert (resources["resourceMemoryRequest"], resources["resourceMemoryLimit"]) == (
            stage_class.memory_request, stage_class.memory_limit), name  # fmt: skip
        assert int(spec["activeDeadlineSeconds"]) == stage_class.timeout_s, name
        assert is_pinned(container["image"]), name
        assert container["image"] == (CUDA_IMAGE if name in gpu else CPU_IMAGE), name
        digest = container["image"].split("@", 1)[1]
        assert {"name": "FRUGALRL_IMAGE_DIGEST", "value": digest} in container["env"], name
        assert "imagePullSecret" not in spec, name  # no pull secret named: none asked for
    training_image = ir["root"]["inputDefinitions"]["parameters"]["training_image"]["defaultValue"]
    assert is_pinned(training_image) and training_image == (CUDA_IMAGE if gpu else CPU_IMAGE)
    assert "NOT PINNED" not in ir["pipelineInfo"].get("description", "")
    if profile == "full":  # every class of step is there, each with its own budget
        assert {_class_of(name, gpu) for name in executors} == {"light", "cpu", "race", "gpu"}
        assert {_component(name) for name in executors if _component(name) in TUNE} == TUNE


def test_a_gpu_pool_on_a_cpu_config_is_refused_before_anything_is_written(tmp_path, capsys):
    custom = tmp_path / "held.yaml"
    custom.write_text(yaml.safe_dump({"name": "held", "stages": {"train": {
        "config": "configs/cartpole-ppo.yaml", "model_name": "cartpole-policy", "pool": "gpu"}}}))  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        _compile(tmp_path, "--profile", str(custom))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "stage train asks for a GPU (pool: gpu) but configs/cartpole-ppo.yaml runs on device cpu" in err
    assert err.count("\n") == 1 and not (tmp_path / "pipeline.yaml").exists()
    custom.write_text(
        yaml.safe_dump(
            {
                "name": "held",
                "stages": {
                    "train": {
                        "config": "configs/cartpole-ppo.yaml",
                        "model_name": "cartpole-policy",
                        "pool": "gpu",
                        "overrides": ["device=auto"],
                    }
                },
            }
        )
    )  # fmt: skip  (the fix the line names)
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    assert "accelerator" in ir["deploymentSpec"]["executors"][_executor(ir, "train")]["container"]["resources"]


def test_a_profile_names_the_cluster_secrets_every_step_reads(tmp_path):
    custom = tmp_path / "private.yaml"
    custom.write_text(yaml.safe_dump({
        "name": "private",
        "cluster": {"image_pull_secret_name": "regcred", "tracking_secret_name": "team-mlflow",
                    "artifact_secret_name": "minio-keys"},
        "stages": {"train": {"config": "configs/cartpole-ppo.yaml", "model_name": "cartpole-policy"}},
    }))  # fmt: skip
    ir, platform = _compile(tmp_path, "--profile", str(custom))
    placed = _placed(platform)
    assert set(placed) == set(ir["deploymentSpec"]["executors"]) == {"exec-train", "exec-evaluate", "exec-register",
                                                                       "exec-report"}  # fmt: skip
    for name, spec in placed.items():
        assert [pull["secretName"] for pull in spec["imagePullSecret"]] == ["regcred"], name
        secrets = _secret_env(spec)
        assert secrets["MLFLOW_TRACKING_URI"] == ("team-mlflow", False), name
        assert secrets["AWS_SECRET_ACCESS_KEY"] == secrets["MLFLOW_S3_ENDPOINT_URL"] == ("minio-keys", False), name
        env = ir["deploymentSpec"]["executors"][name]["container"]["env"]
        assert {"name": "FRUGALRL_TRACKING_SECRET", "value": "team-mlflow"} in env, name


def test_retries_caching_and_the_race_stage_of_the_full_profile(tmp_path):
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
    loops = {task["taskInfo"]["name"]: name for name, task in tasks.items() if name.startswith("for-loop")}
    loop = tasks[loops["tune-workers"]]
    assert loop["parameterIterator"]["items"]["raw"] == "[0, 1, 2, 3]"  # four Optuna workers share one study
    assert loops["tune-workers"] in tasks["tune-best"]["dependentTasks"]
    assert tasks["train"]["inputs"]["parameters"]["tuned"]["taskOutputParameter"]["producerTask"] == "tune-best"
    assert "pretrain" in loop["dependentTasks"]  # every trial starts from the pretrained evaluator
    assert tasks["pretrain"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "pivot"
    assert tasks["train"]["inputs"]["artifacts"]["pretrained"]["taskOutputArtifact"]["producerTask"] == "pretrain"
    # full's race: 3 contenders x 5 seeds as one ParallelFor (never cached, never retried), the pivot evaluator the
    # train stage pretrains built once for both, the decision's output added by the tune workers, the best trial and
    # the training step, its table in the report
    race = tasks[loops["race-runs"]]
    runs = json.loads(race["parameterIterator"]["items"]["raw"])
    assert [(r["contender"], r["seed"]) for r in runs[:4]] == [("plain", 1), ("pivot", 1), ("random-skip", 1),
                                                              ("plain", 2)]  # fmt: skip
    assert len(runs) == 15 and runs[2]["overrides"] == ["selection.kind=random", "selection.settings={}"]
    inner = ir["components"][race["componentRef"]["name"]]["dag"]["tasks"]["race-run"]
    assert not inner["cachingOptions"].get("enableCache", False) and "retryPolicy" not in inner
    assert "pretrain" in race["dependentTasks"] and sum(name.startswith("pretrain") for name in tasks) == 2
    decide = tasks["race-decide"]
    assert decide["inputs"]["parameters"]["rows"]["taskOutputParameter"]["producerTask"] == loops["race-runs"]
    for consumer in ("train", "tune-best"):
        assert tasks[consumer]["inputs"]["parameters"]["raced"]["taskOutputParameter"]["producerTask"] == "race-decide"
    tune = ir["components"][tasks[loops["tune-workers"]]["componentRef"]["name"]]["dag"]["tasks"]["tune-worker"]
    assert tune["inputs"]["parameters"]["raced"]["componentInputParameter"]  # the decision, passed into the loop
    assert tasks["report"]["inputs"]["artifacts"]["race"]["taskOutputArtifact"]["producerTask"] == "race-decide"


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
    executors, placed = ir["deploymentSpec"]["executors"], _placed(platform)
    assert all("accelerator" not in e["container"]["resources"] for e in executors.values())
    assert not any("nodeSelector" in p or "tolerations" in p for p in placed.values())
    # within the 2 cores it was written for
    assert max(float(e["container"]["resources"]["cpuLimit"]) for e in executors.values()) <= 2
    custom = tmp_path / "no-tune.yaml"
    custom.write_text(yaml.safe_dump({"name": "lean", "stages": {"train": {"config": "configs/cartpole-ppo.yaml",
                                      "model_name": "cartpole-policy"}}}))  # fmt: skip
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    # no pivot, tune, latent or peft stage
    assert set(ir["root"]["dag"]["tasks"]) == {"train", "evaluate-and-register", "report"}


def test_profile_stage_without_a_logged_model_is_a_clear_error(tmp_path):
    from frugalrl.pipelines.production import load_profile

    custom = tmp_path / "untracked.yaml"
    custom.write_text(yaml.safe_dump({"name": "x", "stages": {"peft": {"config": "configs/peft-quick.yaml",
                                      "model_name": "p"}}}))  # fmt: skip
    with pytest.raises(ConfigError, match="logs no MLflow model; add tracking.enabled=true"):
        load_profile(str(custom))


def test_unknown_profile_is_a_clear_error(tmp_path):
    from frugalrl.pipelines.production import load_profile

    with pytest.raises(ConfigError, match="known profiles: \\['full', 'quick'\\]"):
        load_profile("nope")


def test_report_has_curves_costs_decisions_and_peft(tmp_path):
    """The report stage's library call on real run directories."""
    from frugalrl.ops.steps import report_step
    from frugalrl.training import train

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
    assert "<h3>Learning curve (training episodes)</h3>" in text and "data:image/png;base64," in text
    assert "the sampling policy, exploring" in text  # the curve says what it is, unlike the evaluation
    assert "Cost per stage" in text and "return at training end" in text
    assert re.search(r"<td>-?[\d.]+ over \d+ episodes</td>", text)  # the figure says what it is
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
            "peft_source_promotion", "peft_adapted", "peft_comparison", "peft_promotion",
            "race"} == set(inputs)  # fmt: skip


def test_multi_worker_training_on_gpu_becomes_a_trainjob_stage(tmp_path):
    custom = tmp_path / "dist.yaml"
    custom.write_text(yaml.safe_dump({"name": "dist", "stages": {"train": {
        "config": "configs/cartpole-ppo.yaml", "overrides": ["distributed.workers=4", "device=cuda"],
        "model_name": "cartpole-policy"}}}))  # fmt: skip
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    tasks = ir["root"]["dag"]["tasks"]
    assert "train-distributed" in tasks and "train" not in tasks
    params = tasks["train-distributed"]["inputs"]["parameters"]
    assert params["node_selector"]["componentInputParameter"] == "gpu_node_selector"
    assert params["namespace"]["componentInputParameter"] == "training_namespace"
    assert params["image"]["componentInputParameter"] == "training_image"
    producer = tasks["evaluate-and-register"]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]["producerTask"]
    assert producer == "train-distributed"
    # the step only submits and follows the job: it holds no GPU, its workers do (in the CUDA image)
    submitter = ir["deploymentSpec"]["executors"]["exec-train-distributed"]["container"]
    assert "accelerator" not in submitter["resources"] and submitter["image"] == CPU_IMAGE
    assert ir["root"]["inputDefinitions"]["parameters"]["training_image"]["defaultValue"] == CUDA_IMAGE
    # four workers on the CPU pool are one pod's training: no job
    custom.write_text(yaml.safe_dump({"name": "dist", "stages": {"train": {
        "config": "configs/cartpole-ppo.yaml", "overrides": ["distributed.workers=4"],
        "model_name": "cartpole-policy"}}}))  # fmt: skip
    ir, _ = _compile(tmp_path, "--profile", str(custom))
    assert "train" in ir["root"]["dag"]["tasks"] and "train-distributed" not in ir["root"]["dag"]["tasks"]


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


def test_a_cluster_without_the_optuna_key_starts_every_step_but_the_tuning_ones(tmp_path):
    """What the execution test's stand-in gives each pod from the compiled IR: the Secret's keys, the optional
    ones only when present, and no pod for a step whose required key is missing (as Kubernetes does)."""
    from .cluster_executor import SecretMissing, secret_environment

    _, platform = _compile(tmp_path, "--profile", "quick", images=("--image", CPU_IMAGE))
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    secrets = {"frugalrl-tracking": {"MLFLOW_TRACKING_URI": "http://mlflow:5000", "MLFLOW_TRACKING_TOKEN": "t"}}
    for name, spec in executors.items():
        if _component(name) in TUNE:
            with pytest.raises(SecretMissing, match="OPTUNA_STORAGE"):
                secret_environment(spec, secrets)
        else:
            assert secret_environment(spec, secrets) == {"MLFLOW_TRACKING_URI": "http://mlflow:5000",
                                                         "MLFLOW_TRACKING_TOKEN": "t"}, name  # fmt: skip
