// The client suite with the core's ConvlogClient: requests through the global fetch.
import { ConvlogClient } from "../src/index.js";
import { clientSuite } from "./suite.js";

clientSuite(ConvlogClient);
