// Node only: the browser build maps this module away (package.json "browser"), and the client
// imports it only when given a path, which only Node callers do.
import { openAsBlob } from "node:fs";

/**
 * A file on disk as a Blob whose slices are read from the file when sent, never held whole in
 * memory; reading one after the file changed fails rather than sending other bytes.
 */
export const openFile = (path: string): Promise<Blob> => openAsBlob(path);
