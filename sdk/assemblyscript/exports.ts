// The host's entry points, for a plugin's entry file to re-export:
//
//     export * from "@plantgate/sdk-assemblyscript/exports";
export * from "./assembly/exports";
