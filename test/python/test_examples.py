"""The examples run end to end in-process (this pytest already runs under mpirun)."""

import os
import shutil
import sys
import tempfile

import pytest
import torch

import chorus.torch as hvd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))

import pytorch_mnist  # noqa: E402


def synthetic_benchmark():
    pytest.importorskip("torchvision")  # same answer on every rank: one machine
    import pytorch_synthetic_benchmark
    return pytorch_synthetic_benchmark


def gathered_flat_params(model, name):
    flat = torch.cat([p.detach().reshape(-1) for p in model.state_dict().values()
                      if p.dtype.is_floating_point])
    return hvd.allgather(flat.unsqueeze(0), name=name)


def test_synthetic_benchmark_runs_and_reports(capsys):
    img_secs = synthetic_benchmark().main(
        ["--model", "resnet18", "--image-size", "32", "--batch-size", "2",
         "--num-warmup-batches", "1", "--num-batches-per-iter", "1", "--num-iters", "2"])
    assert len(img_secs) == 2 and all(s > 0 for s in img_secs)
    out = capsys.readouterr().out
    if hvd.rank() == 0:
        assert "Model: resnet18" in out
        assert "Number of CPUs: %d" % hvd.size() in out
        assert "Img/sec per CPU: " in out
        assert "Total img/sec on %d CPU(s): " % hvd.size() in out
    else:
        assert out == ""


def test_synthetic_benchmark_adasum_is_rejected_clearly():
    # Raised on every rank before any collective, so the ranks stay in step.
    bench = synthetic_benchmark()
    with pytest.raises(ValueError, match="Adasum"):
        bench.main(["--model", "resnet18", "--image-size", "32", "--use-adasum"])


@pytest.fixture
def rank_dir():
    """A new directory of this rank's own (not pytest's tmp_path, shared by the ranks)."""
    d = tempfile.mkdtemp(prefix="chorus_test_examples_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_mnist_trains_checkpoints_on_rank0_and_resumes(rank_dir, capsys):
    ckpt = os.path.join(rank_dir, "ckpt")  # a different directory on every rank
    if hvd.rank() != 0:
        os.makedirs(ckpt)
    args = ["--epochs", "2", "--train-size", "1536", "--test-size", "192", "--log-interval",
            "0", "--checkpoint-dir", ckpt]
    res = pytorch_mnist.main(args)
    assert res["resumed_from"] == 0
    assert len(res["train_loss"]) == 2 and len(res["samples_per_sec"]) == 2
    assert res["train_loss"][1] < res["train_loss"][0]
    assert res["test_loss"] < 2.3  # below chance level: log(10) = 2.303
    assert all(s > 0 for s in res["samples_per_sec"])
    # Metrics are averaged with allreduce: identical on every rank.
    everyone = hvd.allgather_object((res["train_loss"], res["test_loss"]))
    assert all(e == everyone[0] for e in everyone)
    # Every rank ends with the same parameters.
    params = gathered_flat_params(res["model"], "test_examples.mnist_params")
    for r in range(hvd.size()):
        assert torch.equal(params[r], params[0])
    # Only rank 0 writes checkpoints.
    files = sorted(os.listdir(ckpt))
    if hvd.rank() == 0:
        assert files == ["checkpoint-1.pth.tar", "checkpoint-2.pth.tar"]
        assert res["checkpoint"] == os.path.join(ckpt, "checkpoint-2.pth.tar")
        saved = torch.load(res["checkpoint"])
        for k, v in res["model"].state_dict().items():
            assert torch.equal(saved["model"][k], v), k
    else:
        assert files == [] and res["checkpoint"] is None
    out = capsys.readouterr().out
    if hvd.rank() == 0:
        assert "Epoch 2: train loss" in out and "samples/sec" in out
        assert "Test set: Average loss" in out

    # A third epoch resumes from rank 0's newest checkpoint, on every rank.
    res3 = pytorch_mnist.main(["--epochs", "3"] + args[2:])
    assert res3["resumed_from"] == 2 and len(res3["train_loss"]) == 1
    params3 = gathered_flat_params(res3["model"], "test_examples.mnist_params3")
    for r in range(hvd.size()):
        assert torch.equal(params3[r], params3[0])
    files = sorted(os.listdir(ckpt))
    if hvd.rank() == 0:
        assert files[-1] == "checkpoint-3.pth.tar"
    else:
        assert files == []
