"""Trace readers: Philly (unsorted, VC sizes), openb (typed nodes, gpu_spec), plain CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, resolve_cluster, simulate
from scheduler.simulate.traces import ClusterSpec, NodeGroup, TraceError, read_trace


def write(path: Path, text: str) -> Path:
    path.write_text(text.strip() + "\n")
    return path


@pytest.fixture
def philly(tmp_path: Path) -> Path:
    write(tmp_path / "philly_vc_nodes.csv", "vc,node num\naaa111,2\nbbb222,1\n")
    return write(
        tmp_path / "philly_jobs_pollux.csv",
        """
timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,bbb222
2017-10-09 06:13:03,2951.0,2,5902.0,aaa111
2017-10-09 06:13:03,10.0,1,10.0,aaa111
2017-10-10 06:13:03,5.0,8,40.0,zzz999
""",
    )


def test_philly_is_sorted_rebased_and_sized_per_vc(philly: Path) -> None:
    trace = read_trace(philly, "philly")
    assert [job.submit for job in trace.jobs] == [0.0, 0.0, 48 * 60 + 52, 86400.0]
    assert [job.id for job in trace.jobs] == [1, 2, 3, 4]
    assert [job.queue for job in trace.jobs] == ["aaa111", "aaa111", "bbb222", "zzz999"]
    assert [job.duration for job in trace.jobs[:2]] == [2951.0, 10.0]  # file order kept on ties
    assert trace.queue_clusters == {
        "aaa111": ClusterSpec((NodeGroup(2, 8, "V100-16GB"),)),
        "bbb222": ClusterSpec((NodeGroup(1, 8, "V100-16GB"),)),
    }
    assert trace.cluster is not None and trace.cluster.gpus == 24
    assert [card.name for card in trace.catalog] == ["V100-16GB"]


def test_philly_per_vc_drops_jobs_of_vcs_without_nodes(philly: Path) -> None:
    trace = resolve_cluster(read_trace(philly, "philly"), ClusterOverride(), per_vc=True)
    summary = simulate(trace, policy_setup("fifo"), DrawConfig(not_ready_share=0.0), per_vc=True)
    assert summary["trace"]["dropped"] == {"vc_without_nodes": 1}
    assert summary["jobs"] == 3 and summary["finished"] == 3
    assert set(summary["by_queue"]) == {"aaa111", "bbb222"}
    assert summary["gpus"] == 24 and summary["clusters"] == 2


def test_nodes_option_pools_every_queue_into_one_cluster(philly: Path) -> None:
    trace = resolve_cluster(
        read_trace(philly, "philly"), ClusterOverride(1, 8, "A100"), per_vc=False
    )
    assert trace.cluster == ClusterSpec((NodeGroup(1, 8, "A100"),))
    assert [card.name for card in trace.catalog] == ["A100"]
    with pytest.raises(TraceError, match="per-vc"):
        resolve_cluster(read_trace(philly, "philly"), ClusterOverride(1, 8), per_vc=True)


def test_openb_typed_nodes_gpu_spec_fractions_and_qos(tmp_path: Path) -> None:
    write(
        tmp_path / "openb_node_list_gpu_node.csv",
        """
sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,64000,262144,2,P100
n2,96000,786432,8,G2
n3,96000,786432,0,
n4,64000,262144,2,P100
""",
    )
    pods = write(
        tmp_path / "openb_pod_list_gpuspec33.csv",
        """
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,1000,1024,1,460,,LS,Running,100,400,150
p1,1000,1024,0,0,,LS,Running,50,60,50
p2,1000,1024,2,1000,V100M16|P100|P100,BE,Running,200,700,200
p3,1000,1024,1,1000,G2,Burstable,Pending,300,,
p4,1000,1024,8,1000,G2,Guaranteed,Running,10,20,12
""",
    )
    trace = read_trace(pods, "openb")
    assert trace.dropped == {"cpu_only": 1, "never_scheduled": 1}
    assert [(j.submit, j.duration, j.gpus) for j in trace.jobs] == [
        (0.0, 8.0, 8),
        (90.0, 250.0, 1),  # a fractional GPU is one whole GPU
        (190.0, 500.0, 2),
    ]
    assert [j.gpu_types for j in trace.jobs] == [("G2",), None, ("V100M16", "P100")]
    assert [j.priority for j in trace.jobs] == [None, None, "idle"]
    assert trace.cluster == ClusterSpec(
        (NodeGroup(2, 2, "P100"), NodeGroup(1, 8, "G2"), NodeGroup(1, 2, "P100"))
    )
    assert [card.name for card in trace.catalog] == ["P100", "G2"]  # only types present


def test_csv_with_and_without_optional_columns(tmp_path: Path) -> None:
    plain = read_trace(
        write(tmp_path / "a.csv", "submit_time,duration,gpus\n5,10,1\n0,20,2"), "csv"
    )
    assert [(j.submit, j.duration, j.gpus, j.queue) for j in plain.jobs] == [
        (0.0, 20.0, 2, "default"),
        (5.0, 10.0, 1, "default"),
    ]
    assert plain.cluster is None
    full = read_trace(
        write(
            tmp_path / "b.csv",
            """
submit_time,duration,gpus,queue,gpu_type,priority,user,est_hours
0,3600,2,vision,A|B,core,alice,4.5
1,60,1,,,,,
""",
        ),
        "csv",
    )
    first, second = full.jobs
    assert (first.queue, first.gpu_types, first.priority, first.user, first.est_hours) == (
        "vision",
        ("A", "B"),
        "core",
        "alice",
        4.5,
    )
    assert (second.queue, second.gpu_types, second.priority, second.user) == (
        "default",
        None,
        None,
        None,
    )
    with pytest.raises(TraceError, match="no node list"):
        resolve_cluster(full, ClusterOverride(), per_vc=False)


def test_bad_files_are_trace_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not found"):
        read_trace(tmp_path / "missing.csv", "csv")
    with pytest.raises(TraceError, match="missing column"):
        read_trace(write(tmp_path / "c.csv", "submit,duration\n1,2"), "csv")
    with pytest.raises(TraceError, match="not a number"):
        read_trace(write(tmp_path / "d.csv", "submit_time,duration,gpus\nx,2,1"), "csv")
    with pytest.raises(TraceError, match="unknown trace format"):
        read_trace(tmp_path / "d.csv", "slurm")
