// The Plantgate guest kit for AssemblyScript: everything a policy plugin
// needs. A plugin's entry file registers its handlers and re-exports the
// host's entry points:
//
//     import { handleValidate, Plant, Decision, allow, deny } from "@plantgate/sdk-assemblyscript";
//     export * from "@plantgate/sdk-assemblyscript/exports";
//
//     handleValidate((p: Plant): Decision => p.id < 1 ? deny(40050, "id must be at least 1") : allow());
//
// Build with --use abort=... (see asconfig.json in the README), so the
// module imports nothing but "plantgate" functions.

export * from "./abi";
export * from "./utf8";
export * from "./decision";
export * from "./request";
export * from "./handlers";
export * from "./log";
export * from "./token";
export * from "./kv";
export * from "./config";
