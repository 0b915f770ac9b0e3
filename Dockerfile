# leased, leasectl and leased-relay on Debian bookworm. The build context is
# the source tree without .local/ (plaintext development tokens) or build
# trees: see .dockerignore. The tests are not built here (LEASE_TESTS=OFF), so
# the image needs none of the test packages.
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libpq-dev libmicrohttpd-dev libjansson-dev \
      libssl-dev libcurl4-openssl-dev librabbitmq-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DLEASE_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && cmake --install /build --prefix /opt/leased

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libpq5 libmicrohttpd12 libjansson4 libssl3 libcurl4 librabbitmq4 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home leased
COPY --from=build /opt/leased /opt/leased
# leasectl finds /opt/leased/share/leased/migrations (and sql/ beside it,
# the function and view definitions) relative to its bin/ folder:
# nothing of the build stage's paths is compiled in (tests/install_check).
ENV PATH=/opt/leased/bin:$PATH \
    LEASE_LISTEN=0.0.0.0:8080
USER leased
EXPOSE 8080
ENTRYPOINT ["leased"]
