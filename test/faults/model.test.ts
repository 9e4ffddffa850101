// The model checker's larger configurations (test/model/configs.ts, LARGER): three owners.
import { LARGER } from '../model/configs.js';
import { checkConfigs } from '../model/suite.js';

describe('model checker: larger configurations', function () {
  this.timeout(1_800_000);
  checkConfigs(LARGER);
});
