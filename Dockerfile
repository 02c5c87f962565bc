# depeg-monitor: one image for every process (monitor, deliver, store, api, run, produce).
# Build:  docker build -t depeg-monitor .
# Run:    docker run --rm depeg-monitor --help
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md* ./
COPY monitor ./monitor
COPY consumers ./consumers
COPY producers ./producers
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# No compilers or build files in the runtime image; a fixed non-root user.
RUN groupadd --system --gid 10001 depeg \
 && useradd --system --uid 10001 --gid depeg --home-dir /var/lib/depeg-monitor depeg \
 && mkdir -p /var/lib/depeg-monitor && chown depeg:depeg /var/lib/depeg-monitor
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001:10001
WORKDIR /var/lib/depeg-monitor
# Listen on all interfaces inside the container; JSON logs for the log collector.
# Runtime files (SQLite store, secret key, run.json) in the state directory, not $HOME.
ENV DEPEG_STORAGE__DATA_DIR=/var/lib/depeg-monitor \
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
