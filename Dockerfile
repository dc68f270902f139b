# The one image of gpu-runbooks in a cluster: `gpuops serve` (Deployment), `gpuops report` (CronJob) and
# `gpuops collect` / `gpuops run` (on-call use), as the manifests of deploy/ run it. Build from the repository root:
#   docker build -t gpu-runbooks:0.1.0 .
#   docker tag gpu-runbooks:0.1.0 registry.example.com/gpu-runbooks:0.1.0 && docker push registry.example.com/gpu-runbooks:0.1.0
# and name that tag once, in `images:` of deploy/overlays/live/kustomization.yaml (the demo overlay uses
# gpu-runbooks:0.1.0 as built). No GPU and no CUDA inside: the runbooks read Prometheus and the Kubernetes
# API. The NCCL probe runs on GPU nodes from a public PyTorch image instead (deploy/nccl-probe/Dockerfile is
# only for registries that cannot pull it). Prometheus URL and tokens come from the environment at run time
# (ConfigMap gpuops-env, Secrets gpuops-serve and gpuops-prometheus), never from the image.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUOPS_HOME=/opt/gpu-runbooks \
    HOME=/tmp

WORKDIR /opt/gpu-runbooks
COPY pyproject.toml README.md ./
COPY gpulib ./gpulib
# the notebooks gpuops runs: the runbooks (and lessons) and the scheduled report; GPUOPS_HOME points here
COPY runbooks ./runbooks
COPY reports/gpu_utilization_report.ipynb ./reports/

# the package with every extra (notebooks, Kubernetes, Prometheus, serve); the kernel spec "python3" papermill asks for
RUN pip install ".[all]" \
 && python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" \
 && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin gpuops

# the uid the manifests' securityContext runs as (runAsUser: 10001)
USER 10001
ENTRYPOINT ["gpuops"]
# every workload of deploy/ gives its own args (serve ..., report ...); alone, the image prints the commands
CMD ["--help"]
