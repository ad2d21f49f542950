// The package's entry for `import ... from "@plantgate/sdk-assemblyscript"`
// (asc resolves a package to its index.ts). The kit is in assembly/.
export * from "./assembly/index";
