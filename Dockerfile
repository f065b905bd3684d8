# Multi-stage image for every EQ Reply process. The build stage runs the same
# scripts/build that scripts/run and scripts/test use (which installs the
# missing build packages with apt), so the container build cannot drift from
# the local one.
FROM debian:bookworm AS build
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY store store
COPY api api
COPY workers workers
COPY dispatcher dispatcher
COPY tools tools
COPY schema schema
COPY tests tests
COPY scripts scripts
RUN EQ_BUILD_DIR=/src/build EQ_BUILD_TYPE=Release scripts/build

FROM debian:bookworm AS runtime
COPY scripts/lib/deps.sh /usr/local/lib/eq/deps.sh
RUN bash /usr/local/lib/eq/deps.sh install libs && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/eq-api /src/build/eq-worker /src/build/eq-dispatcher /src/build/eqctl /src/build/eq-mcp /usr/local/bin/
# /data holds the database, webhook secrets in clear among it: its owner only
# (docs/operations.md, "Files and their modes"). A named volume mounted there
# starts with this mode.
RUN useradd --system --home /var/lib/eq --create-home eq && install -d -m 0700 -o eq /data
USER eq
ENV EQ_DB_PATH=/data/eq.db
# 8080: eq-api. 9101 / 9102: /metrics and /healthz of eq-worker / eq-dispatcher.
EXPOSE 8080 9101 9102
CMD ["eq-api"]
