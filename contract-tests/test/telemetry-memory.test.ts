import { memoryRevocationStore, memoryTelemetrySink } from "@vod/adapter-memory";
import { describeRevocationStore, describeTelemetrySink } from "@vod/contract-tests";

describeTelemetrySink("memory", async () => {
  const sink = memoryTelemetrySink();
  return {
    sink,
    read: async (sessionId) => sink.events.filter((e) => e.session_id === sessionId),
    cleanup: async () => {},
  };
});

describeRevocationStore("memory", async () => {
  // One process is the whole deployment: "another node" is the same store.
  const store = memoryRevocationStore();
  return { store, otherNode: store, cleanup: async () => {} };
});
