/**
 * Root hooks of the fault suite (`npm run test:faults`): print the table of
 * every fault's figures once the run is over.
 */
import { printReport } from '../support/history.js';

export const mochaHooks = {
  afterAll(): void {
    printReport();
  },
};
