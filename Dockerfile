# syntax=docker/dockerfile:1
# The Squall gateway image used by the Helm chart (helm/squall).
#   docker build -t squall:0.1.0 .
#   docker build -t squall:0.1.0 --build-arg WITH_FUSE=1 .   # also for `squall mount`
# The server listens on 0.0.0.0:9000 inside the container and keeps its cache, RocksDB
# index and generated credentials under /var/lib/squall (mount a volume there).

FROM python:3.11-slim AS build
# 1: add fuse3 (libfuse3 and fusermount3) and the mount extra for `squall mount`;
# `squall serve` needs neither.
ARG WITH_FUSE=0
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements requirements
COPY gateway gateway
COPY backends backends
COPY loadtests loadtests
# Wheels of Squall and of its locked dependencies (requirements/runtime.lock, or mount.lock
# with WITH_FUSE=1), so that the final stage needs no build tools and installs exactly those.
RUN lock=requirements/runtime.lock; [ "$WITH_FUSE" = 1 ] && lock=requirements/mount.lock; \
    pip wheel --no-cache-dir --wheel-dir /wheels -r "$lock" \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ARG WITH_FUSE=0
# Debian's fuse3 of the base image's release (its versions are not pinned: they change
# with the base image's security updates).
# hadolint ignore=DL3008
RUN if [ "$WITH_FUSE" = 1 ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends fuse3 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
# Squall and its dependencies exactly as built (and resolved) in the first stage.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pkg=squall; [ "$WITH_FUSE" = 1 ] && pkg="squall[mount]"; \
    pip install --no-cache-dir --no-index --find-links /wheels "$pkg" \
    && groupadd --system --gid 10001 squall \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/squall \
       --create-home --shell /usr/sbin/nologin squall
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/squall
VOLUME ["/var/lib/squall"]
EXPOSE 9000
# Exec form: squall is PID 1 and gets SIGTERM itself (it drains and exits 0).
ENTRYPOINT ["squall"]
CMD ["serve", "--listen", "0.0.0.0:9000", "--data-dir", "/var/lib/squall"]
