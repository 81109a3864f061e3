"""The Helm releases a stack installs, which the stack-wide checks read (a local chart folder must
hold each, ``images.requireMirror`` judges each one's images)."""

from __future__ import annotations

from ..addons import efa_device_plugin, gpu_operator, job_apis, karpenter, kueue
from ..config import GpuTrainingPlatformArgs


def stack_charts(args: GpuTrainingPlatformArgs) -> list[tuple[str, str]]:
    """The (chart, version) of every Helm release the stack installs."""
    charts = [(gpu_operator.CHART, args.gpu_operator.chart_version)]
    if efa_device_plugin.efa_needed(args):
        charts.append((efa_device_plugin.CHART, efa_device_plugin.CHART_VERSION))
    if args.kueue.enabled:
        charts.append((kueue.KUEUE_CHART, args.kueue.chart_version))
    if job_apis.jobset_needed(args) or job_apis.trainer_needed(args):
        charts.append((job_apis.JOBSET_CHART, args.job_set.chart_version))
    if job_apis.trainer_needed(args):
        charts.append((job_apis.TRAINER_CHART, args.trainer.chart_version))
    if args.karpenter.enabled and not args.in_cluster.enabled:
        charts += [(karpenter.KARPENTER_CRD_CHART, args.karpenter.chart_version),
                   (karpenter.KARPENTER_CHART, args.karpenter.chart_version)]
    return charts
