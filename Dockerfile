# depeg-monitor: one image for every process (monitor, deliver, store, api, run, produce).
# Build:  docker build -t depeg-monitor .
#         (--build-arg COMPILED=off: without the mypyc build, pure Python only)
# Run:    docker run --rm depeg-monitor --help
#         docker run --rm depeg-monitor compile --status    # which modules the processes run
#
# The engine, CSV reader and replay loop are compiled with mypyc here, at image build time
# (`depeg-monitor compile`, docs/compiled.md): the build stage has the C compiler, the
# runtime image only the finished extension modules, which DEPEG_MONITOR_COMPILED names.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
# Where the build goes, or "off" for none. It lives with the code it was built from, under
# /opt/depeg-monitor, not in the data directory: that is usually a volume, which would hide
# the build, or keep an old one past an image upgrade.
ARG COMPILED=/opt/depeg-monitor/compiled
# mypyc needs a C compiler and the libc headers (the image's Python has its own headers).
RUN if [ "$COMPILED" != off ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends gcc libc6-dev \
      && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /src
COPY pyproject.toml README.md* ./
COPY monitor ./monitor
COPY consumers ./consumers
COPY producers ./producers
# The runtime's virtual environment, made here and copied whole into the runtime image: the
# build is checked against the installed sources, so it is made from the very files that run.
RUN python -m venv /opt/depeg-monitor \
 && /opt/depeg-monitor/bin/pip install --no-cache-dir .
# The `compiled` extra (mypy, setuptools) goes into a directory of its own, on PYTHONPATH for
# the build alone: the runtime environment never gains it (loading the build needs no mypy).
# The build is then loaded once without it, as the runtime will (the step fails otherwise).
RUN if [ "$COMPILED" != off ]; then \
      extra=$(python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["compiled"]))') \
      && pip install --no-cache-dir --target /tmp/compiled-extra $extra \
      && PYTHONPATH=/tmp/compiled-extra /opt/depeg-monitor/bin/depeg-monitor \
           --log-format console compile --out "$COMPILED" \
      && status=$(DEPEG_MONITOR_COMPILED="$COMPILED" /opt/depeg-monitor/bin/depeg-monitor \
           compile --status) && echo "$status" && echo "$status" | grep -q '^modules: compiled' \
      && rm -rf /tmp/compiled-extra; \
    fi

FROM ${PYTHON_IMAGE}
ARG COMPILED=/opt/depeg-monitor/compiled
# No compilers or build files in the runtime image; a fixed non-root user.
RUN groupadd --system --gid 10001 depeg \
 && useradd --system --uid 10001 --gid depeg --home-dir /var/lib/depeg-monitor depeg \
 && mkdir -p /var/lib/depeg-monitor && chown depeg:depeg /var/lib/depeg-monitor
COPY --from=build /opt/depeg-monitor /opt/depeg-monitor
USER 10001:10001
WORKDIR /var/lib/depeg-monitor
# Listen on all interfaces inside the container; JSON logs for the log collector.
# Runtime files (SQLite store, secret key, run.json) in the state directory, not $HOME.
# DEPEG_MONITOR_COMPILED: the mypyc build made above (or off); should it not match the
# installed sources, the processes run pure Python and say so at start.
ENV PATH=/opt/depeg-monitor/bin:$PATH \
    DEPEG_MONITOR_COMPILED=$COMPILED \
    DEPEG_STORAGE__DATA_DIR=/var/lib/depeg-monitor \
    DEPEG_API__HOST=0.0.0.0 \
    DEPEG_METRICS__HOST=0.0.0.0 \
    DEPEG_LOGGING__FORMAT=json \
    PYTHONUNBUFFERED=1
# 8080: HTTP API (also /metrics, /healthz, /readyz); 9108: ops listener of the other processes.
EXPOSE 8080 9108
# SIGTERM is handled: consumers finish the batch in flight, commit and leave their group.
STOPSIGNAL SIGTERM
ENTRYPOINT ["depeg-monitor"]
CMD ["run"]
